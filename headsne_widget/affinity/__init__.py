"""Stage 2, P: the joint probabilities t-SNE embeds, from one attention head (P = A + A^T, zero diagonal,
normalised: the thesis's attention-head t-SNE) or from a layer's hidden states (perplexity-calibrated
Gaussians), and the one function from a selection (mode, layer, head, ...) to P.

Imports only from :mod:`headsne_widget.capture` and the shared modules at the package root.
"""
