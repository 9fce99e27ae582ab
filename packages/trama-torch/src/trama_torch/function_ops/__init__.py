"""torch modules of the catalog's opset-2 function families, one module per family; merged into
:func:`trama_torch.functions.function_factories`."""
