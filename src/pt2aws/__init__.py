"""pt2aws."""
