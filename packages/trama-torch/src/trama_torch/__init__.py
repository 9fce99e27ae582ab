"""trama-torch: export torch.nn models to trama documents, import them back, run them."""
