"""`cove serve`: Cove's engine behind the OpenAI API on this computer."""
