"""The recovery rungs' mechanisms, one module each; ``activities/recovery/recover.py`` runs them."""
