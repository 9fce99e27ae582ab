"""Export without example inputs: torch.fx traces each module's ``forward`` one level deep
(the path that serves plain models; with example inputs, :mod:`trama_torch.capture` runs
``torch.export``). Internal: reached through the plugin's exporter."""
