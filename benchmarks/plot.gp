# Bar chart of attn vs naive vs PyTorch per case from compare-torch.py --csv:
#   gnuplot -e "csv='bench.csv'; threads=2; out='docs/bench-2t.png'" benchmarks/plot.gp
if (!exists("csv")) csv = 'bench.csv'
if (!exists("threads")) threads = 2
if (!exists("out")) out = 'bench.png'
if (!exists("label")) label = ''
set terminal pngcairo size 900,480 font ',10'
set output out
set datafile separator ','
set title sprintf('attn vs naive vs PyTorch, fp32, %d thread(s)%s: median ms per call (log scale, lower is better)', threads, label)
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set logscale y
set ylabel 'ms'
set grid ytics
set key top left horizontal
set yrange [0.5:5000]
# One column per implementation: the CSV is reshaped by awk below.
cmd(impl) = sprintf("< awk -F, -v t=%d -v i=%s 'NR>1 && $2==t && $3==i {print $1\",\"$4}' %s", threads, impl, csv)
plot cmd('attn') using 2:xtic(1) title 'attn' lc rgb '#2b7bba', \
     cmd('naive') using 2 title 'naive (scores, softmax, GEMM)' lc rgb '#aaaaaa', \
     cmd('torch') using 2 title 'PyTorch (SDPA; S6: nn.MultiheadAttention)' lc rgb '#e4572e'
