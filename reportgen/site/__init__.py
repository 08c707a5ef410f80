"""``reportgen build``: the versioned, append-only static report site.

The package, by concern:

- :mod:`~reportgen.site.build`: the build's stages, from the lock to the commit (``build_site``);
- :mod:`~reportgen.site.plan`: the store's catalog and the old manifest, reuse/render/carry, retention, the renderer
  version;
- :mod:`~reportgen.site.lists`: the index's newest runs, the archive pages, the history charts (drawn when changed);
- :mod:`~reportgen.site.manifest`: ``manifest.json``'s format and the layout's constants (read by publish too);
- :mod:`~reportgen.site.fs`: the lock, the commit (new run folders in, the old ones carried over) and the swap
  (shared with publish);
- :mod:`~reportgen.site.workers`: forked children and worker pools that die with the build;
- :mod:`~reportgen.site.pages`: run pages, their charts and data files, the index, help and assets.

Layout of a built site: ``index.html``, ``index.md``, ``runs/<run_id>/{index.html,report.md,*.svg,data/}``,
``archive/<n>.html``, ``latest/index.html``, ``history/*.png``, ``help/index.html``, ``assets/style.css``,
``.nojekyll``, ``manifest.json``. Every link is relative, so the site works offline and under any sub-path.
"""

from reportgen.site.build import BuildResult, build_site, normalise_base_url
from reportgen.site.plan import renderer_version

__all__ = ["BuildResult", "build_site", "normalise_base_url", "renderer_version"]
