"""Downloading models from the Hub in a child process, resumable across restarts.

protocol  the job line and the event lines between the parent and the child
child     the child process (`python -m models.download.child`)
transfer  metadata HEADs, ranged GETs with retries, hashing (child only: imports huggingface_hub)
partial   `<sha256>.part` files and their JSON sidecars
place     moving verified files into the models folder
split     split GGUF names (`-00001-of-00003.gguf`)
preflight the disk-space check
cleanup   start-up removal of orphaned partial files

The parent side (starting, pausing, resuming, cancelling, registering) is app.downloads.
"""
