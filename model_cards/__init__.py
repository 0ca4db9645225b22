"""Model card templates, shipped inside the package as `hf_grounded.model_cards`."""
