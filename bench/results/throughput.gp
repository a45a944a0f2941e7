# Written by binstore-bench; run from any directory.
set terminal pngcairo size 1400,700
set output '/tmp/bw/bench/results/throughput.png'
set title 'binstore throughput, mode refs (SBCL 2.2.9.debian)'
set datafile separator '\t'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set logscale y
set yrange [1:*]
set ylabel 'MB/s (log scale)'
set grid ytics mytics
set xtics rotate by 45 right nomirror
set key top right
set bmargin 9
plot '/tmp/bw/bench/results/throughput.dat' using 2:xtic(1) title 'store', '' using 3 title 'restore'
