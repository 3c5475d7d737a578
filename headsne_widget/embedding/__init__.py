"""Stage 3, t-SNE: the exact optimisation of a given P (streamed frame by frame, batched over restarts,
compiled on the CPU, torch on CUDA), its KL and gradient, and the display maths of an embedding
(quantile-equidistant axes, Procrustes alignment). Pure functions, array in and array out.

Imports only from :mod:`headsne_widget.affinity` and the shared modules at the package root.
"""
