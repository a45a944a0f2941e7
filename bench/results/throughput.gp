# Written by binstore-bench; run from any directory.
set terminal pngcairo size 1400,700
set output '/tmp/bench1/bench/results/throughput.png'
set title 'binstore vs best peer (same run), cold (one call after a full GC, min of 5), mode refs (SBCL 2.2.9.debian)'
set datafile separator '\t'
set datafile missing 'NaN'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set logscale y
set yrange [1:*]
set ylabel 'MB/s of binstore output (log scale)'
set grid ytics mytics
set xtics rotate by 45 right nomirror
set key top right
set bmargin 9
plot '/tmp/bench1/bench/results/throughput.dat' using 2:xtic(1) title 'binstore store', '' using 3 title 'best peer store', '' using 4 title 'binstore restore', '' using 5 title 'best peer restore'
