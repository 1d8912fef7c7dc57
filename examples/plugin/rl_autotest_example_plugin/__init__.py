"""An rl-autotest plugin: the ``keyvalue`` log reader and the ``median`` check kind."""
