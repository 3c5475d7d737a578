"""Stage 6, figures: the bokeh figures of the thesis and of the studies (:mod:`.plots` names them all, as
``headsne_widget.plots``; by family in :mod:`.token_plots`, :mod:`.study_plots`, :mod:`.head_plots`, sharing
:mod:`.plot_style`). After the studies, whose tables they draw; imports from every earlier stage.
"""
