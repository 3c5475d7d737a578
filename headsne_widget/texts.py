"""Example texts. ``TSNE_ABSTRACT`` is the project's standard text: the thesis applies attention-head t-SNE to it
(section 4.2, Appendix A.4), so results here can be compared with its figures."""

from __future__ import annotations

__all__ = ["TSNE_ABSTRACT"]

#: Abstract of van der Maaten and Hinton (2008), "Visualizing Data using t-SNE", verbatim from the thesis's
#: Appendix A.4 (its two halves, split there by a page break, joined with one space).
TSNE_ABSTRACT: str = (
    'We present a new technique called "t-SNE" that visualizes high-dimensional data by giving each '
    "datapoint a location in a two or three-dimensional map. The technique is a variation of Stochastic "
    "Neighbor Embedding (Hinton and Roweis, 2002) that is much easier to optimize, and produces "
    "significantly better visualizations by reducing the tendency to crowd points together in the center "
    "of the map. t-SNE is better than existing techniques at creating a single map that reveals structure"
    " at many different scales. This is particularly important for high-dimensional data that lie on "
    "several different, but related, low-dimensional manifolds, such as images of objects from multiple "
    "classes seen from multiple viewpoints. For visualizing the structure of very large data sets, we "
    "show how t-SNE can use random walks on neighborhood graphs to allow the implicit structure of all of"
    " the data to influence the way in which a subset of the data is displayed. We illustrate the "
    "performance of t-SNE on a wide variety of data sets and compare it with many other non-parametric "
    "visualization techniques, including Sammon mapping, Isomap, and Locally Linear Embedding. The "
    "visualizations produced by t-SNE are significantly better than those produced by the other "
    "techniques on almost all of the data sets."
)
