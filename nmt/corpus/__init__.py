"""A corpus of our own, built from named Debian packages: the Ding dictionary's example
sentences and word pairs (ding), software messages from gettext catalogs (catalogs),
documentation pages in both languages aligned by their structure (documentation), cleaned
and counted (cleaning), mixed with Multi30k and split into held-out units (build). The
packages come with `apt-get download` and `dpkg -x` (packages): nothing is installed, and
nothing of them is committed."""
