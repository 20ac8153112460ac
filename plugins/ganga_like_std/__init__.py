"""Built-in applications, splitters, datasets and files, registered as plugins."""
