"""Browser tests: a real JupyterLab / Notebook 7 with headless chromium (see conftest.py)."""
