"""Parts of e2e/chaos.py (`just chaos`)."""
