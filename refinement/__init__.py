"""refinement: the machinery that checks the implementation against the TLA+ model."""
