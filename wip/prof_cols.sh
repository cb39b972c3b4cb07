#!/bin/bash
python3 -m pip install -q --no-build-isolation --no-deps -e . >/dev/null 2>&1
timeout 200 ncu --kernel-name regex:"gesv16_cols|getrf_cols" --launch-skip 2 --launch-count 2 --section SpeedOfLight --section InstructionStats --section LaunchStats --section Occupancy --section WarpStateStats python3 scratch/prof_cols.py > $OUT/ncu.txt 2>&1
grep -E "gesv16_cols|getrf_cols_kernel|Duration|Executed Instructions  |Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Stall" $OUT/ncu.txt | head -30
