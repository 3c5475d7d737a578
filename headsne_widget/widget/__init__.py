"""Stage 4, the widget: ``HeadSNE`` (the user API), its synced model and protocol, the background jobs
that compute for it, and its static views (bokeh figures, standalone HTML).

Imports from capture and tsne, never from the studies.
"""
