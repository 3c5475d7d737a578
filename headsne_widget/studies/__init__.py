"""Stage 5, studies: the thesis's experiments over one text (:mod:`.analyses`) and over a corpus on Dask
(:mod:`.corpus`), as tidy rows that :mod:`headsne_widget.widget.plots` draws. Imports from every earlier
stage; nothing imports it.
"""
