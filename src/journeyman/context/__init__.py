"""Rules, project knowledge and the context the model is shown each turn."""
