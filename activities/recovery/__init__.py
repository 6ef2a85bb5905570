"""The recovery rungs' mechanisms, one module each; ``activities/recover.py`` runs them."""
