"""Stage 8, the command line: ``headsne-demo`` (:mod:`.launch`) opens the demo notebook in JupyterLab. Last in the
pipeline; it imports none of the package (it starts a server that runs the notebook)."""
