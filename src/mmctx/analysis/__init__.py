"""Analyses over embeddings and results: projections, similarity distributions."""
