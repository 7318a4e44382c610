"""The large-neighbourhood search (``improve.py``): its incumbent, its neighbourhoods, their sub-problems."""
