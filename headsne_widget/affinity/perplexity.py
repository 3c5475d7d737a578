"""The perplexity search's constants, shared by the exact Gaussians (:mod:`.affinities`) and the k-nearest-neighbour
ones (:mod:`.sparse`): the same stopping rule and step budget as scikit-learn's ``_binary_search_perplexity``."""

from __future__ import annotations

__all__ = ["EPSILON_DBL", "N_STEPS", "PERPLEXITY_TOLERANCE"]

#: a row's entropy is within this of log(perplexity) when its search stops
PERPLEXITY_TOLERANCE = 1e-5
#: most bisection steps a row takes
N_STEPS = 100
#: what a row's sum of Gaussians becomes when it underflows to 0
EPSILON_DBL = 1e-8
