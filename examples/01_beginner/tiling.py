"""Tiling in pypto: pypto.set_vec_tile_shapes sets the tile shape of the
vector ops traced after it; the tile shape decides how many tasks run
(stats()["tasks"]) and what the Tile Graph looks like (compiled.dump("tile")).
The tile is passed as a compile-time constant here, so each tile shape is its
own specialisation of one jitted function."""

import torch

import pypto

M, N = 100, 256


@pypto.frontend.jit
def scaled_exp(x: pypto.Tensor((M, N), pypto.DT_FP32), tile: tuple):
    pypto.set_vec_tile_shapes(*tile)          # must come before the ops, with one size per operand dim
    assert pypto.get_vec_tile_shapes() == tile
    return pypto.exp(x * 0.5) + 1


def main():
    x = torch.randn(M, N)
    ref = torch.exp(x * 0.5) + 1
    print(f"exp(x * 0.5) + 1 on {M}x{N}:")
    for tile in ((32, 64), (32, 256), (100, 256), (8, 32)):
        torch.testing.assert_close(scaled_exp(x, tile), ref, atol=2e-5, rtol=2e-5)
        stats = pypto.compile(scaled_exp, x, tile).stats()
        expected = pypto.ceildiv(M, tile[0]) * pypto.ceildiv(N, tile[1])   # one task per tile of the grid
        assert stats["tasks"] == expected, (tile, stats["tasks"], expected)
        print(f"  tile {str(tile):10s} -> {stats['tasks']:3d} tasks, "
              f"{stats['incore_functions']} InCore function(s), {sum(stats['buffer_bytes'].values())} buffer bytes")
    assert len(scaled_exp._cache) == 4

    # 100 rows do not divide by 32: the last row block is a tail with valid extent min(32, 100 - offset).
    tile_text = pypto.compile(scaled_exp, x, (32, 64)).dump("tile")
    lines = tile_text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith("nest @"))
    print("  compiled.dump('tile') for tile (32, 64), first nest:")
    for ln in lines[start:start + 8]:
        print("   ", ln)
    assert "valid [" in tile_text and "min(" in tile_text


if __name__ == "__main__":
    main()
