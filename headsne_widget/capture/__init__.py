"""Stage 1, capture: a Hugging Face model run on a text, and what is kept of it.

Loading (cached per model and device), tokenising with character spans, the forward pass with each
layer's attention captured through transformers' ``AttentionInterface`` (never every head's n x n at
once), the layer-wise maximum-attention grid, and :class:`Extraction`, which recomputes any head exactly.
Imports nothing from the later stages (tsne, widget, studies).
"""
