"""pgsift's version and its releases: the one source for pyproject.toml (read by setuptools),
`pgsift.__version__` and the extension's versions (pgsift.extension)."""

VERSION = "0.2.0"

# Each release, oldest first: its version and the last migration it shipped. An extension
# upgrade script from a release runs the migrations after that one.
RELEASES: dict[str, str] = {
    "0.1.0": "0017_spaces_review",
}

# Each release's commit on main, which its git tag (v + version) names. Tests install a release
# from this commit: a clone of main alone carries it, where tags may not travel.
RELEASE_COMMITS: dict[str, str] = {
    "0.1.0": "fdb5d8bab4323accd9c955100d28af3032b3185d",
}
