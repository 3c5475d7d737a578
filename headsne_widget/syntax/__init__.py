"""The syntax stage (after capture): dependency parses as data and what a model's heads and states hold of them.

:mod:`.parses` is the contract, one pandas DataFrame a text with a row per word (``word``, ``start``, ``end``,
``pos``, ``dep``, ``head``, ``sentence``) from spaCy, a CoNLL-U treebank or a parser of the user's;
:mod:`.alignment` maps words to a model's tokens by character spans, whatever the tokenizer, with one rule for a
word in several pieces (attention to a word: the sum over its pieces; from a word: the mean; a word's state:
the mean); :mod:`.relations` scores each head against each relation on one text (Clark et al. 2019) and adds texts
up into a table; :mod:`.probes` holds the relation classifier (Coenen et al. 2019) and the structural distance
probe (Hewitt and Manning 2019). The functions over a corpus (``relation_heads``, ``relation_probe``,
``tree_probe``, with Dask) are in :mod:`headsne_widget.studies.syntax`; the widget calls this stage per text.

Imports capture (and the shared modules) only; the widget, the studies and the figures import it.
"""
