"""Raw sources: a validated config and one reader per format."""
