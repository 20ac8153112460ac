"""Pictures of the stats layer's numbers (Plotly): the figures every view shares
(``figures``), the one-file report (``report``) and the notebook's live dashboard
(``dashboard``). Plotly is imported only by these modules, when a picture is asked for."""
