"""Assembling and rearranging arrays: stacking, splitting, tiling, flipping, padding,
triangles and diagonals, take and take_along_axis."""
