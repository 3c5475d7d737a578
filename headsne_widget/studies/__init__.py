"""Stage 5, studies: the thesis's experiments over one text (:mod:`.analyses`, :mod:`.words`) and over a corpus
on Dask (:mod:`.corpus`: its tasks run by :mod:`.workers`, its tables :mod:`.summaries`), as tidy rows that
:mod:`headsne_widget.figures` draws. Imports from every earlier stage; nothing imports it.
"""
