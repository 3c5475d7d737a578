"""Stage 4, the widget: ``HeadSNE`` (the user API), its synced model and protocol, its owner (the one thread that
sets traits) and the background jobs that compute for it.

Imports from capture, affinity and embedding, never from a later stage; ``HeadSNE.save_html`` alone calls up into
:mod:`headsne_widget.export`, at call time (tests/test_layout.py names it).
"""
