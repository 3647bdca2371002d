"""Where a conversation's reply runs when the same model file is on several of the person's machines."""
