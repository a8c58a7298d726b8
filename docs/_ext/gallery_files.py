"""The image scraper of the gallery: the PNG files an example script wrote.

The examples draw with spheredens' own figure functions (``sd.plot_run``,
``spheredens.plot.plot_comparison``, ...), which write a PNG file and close the figure, as
``spheredens plot`` does. sphinx-gallery runs each code block in the example's folder; after
the block this scraper moves every PNG file that appeared there into the gallery's images (in
the order written) and returns their reST, as sphinx-gallery's own scraper does for open
matplotlib figures (its "Example 2: detecting image files on disk").
"""
from __future__ import annotations

import shutil
from pathlib import Path

from sphinx_gallery.scrapers import figure_rst


def png_files(block, block_vars, gallery_conf):
    """Move the PNG files written next to the example into the gallery; their reST."""
    folder = Path(block_vars["src_file"]).parent
    written = sorted(folder.glob("*.png"), key=lambda p: (p.stat().st_mtime_ns, p.name))
    images = []
    for png in written:
        target = Path(next(block_vars["image_path_iterator"]))
        shutil.move(png, target)
        images.append(str(target))
    return figure_rst(images, gallery_conf["src_dir"])
