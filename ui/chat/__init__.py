"""Having a conversation: the turn controller and its worker, frame pacing, the composer, the
model picker, the settings dialog and presets."""
