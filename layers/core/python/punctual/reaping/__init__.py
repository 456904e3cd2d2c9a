"""reaping."""
