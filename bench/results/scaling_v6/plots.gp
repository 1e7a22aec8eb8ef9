set terminal pngcairo size 1680,800 font 'sans,9'
set termoption noenhanced
set output 'bench/results/scaling_v6/scaling.png'
set datafile missing '?'
set multiplot layout 2,4 title 'Emulated cluster (1 worker + 1 server a host, 3 TFLOP/s, 10G-eq), slowed 256x'
set title 'vgg19: throughput'; set xlabel 'hosts'; set ylabel 'samples/s (real-equivalent)'; set key top left
set xtics (1,2,4,8); set style data linespoints; set style histogram clustered
plot 'bench/results/scaling_v6/throughput_vgg19.dat' u 1:2 w l dt 2 lc rgb 'black' t 'ideal (N x 1 host, full)', '' u 1:3 t 'full 10G', '' u 1:4 t 'sequential 10G', '' u 1:5 t 'full 5G', '' u 1:6 t 'sequential 5G'
set title 'resnet50: throughput'; set xlabel 'hosts'; set ylabel 'samples/s (real-equivalent)'; set key top left
set xtics (1,2,4,8); set style data linespoints; set style histogram clustered
plot 'bench/results/scaling_v6/throughput_resnet50.dat' u 1:2 w l dt 2 lc rgb 'black' t 'ideal (N x 1 host, full)', '' u 1:3 t 'full 10G', '' u 1:4 t 'sequential 10G', '' u 1:5 t 'full 5G', '' u 1:6 t 'sequential 5G'
set title 'inception_v3: throughput'; set xlabel 'hosts'; set ylabel 'samples/s (real-equivalent)'; set key top left
set xtics (1,2,4,8); set style data linespoints; set style histogram clustered
plot 'bench/results/scaling_v6/throughput_inception_v3.dat' u 1:2 w l dt 2 lc rgb 'black' t 'ideal (N x 1 host, full)', '' u 1:3 t 'full 10G', '' u 1:4 t 'sequential 10G', '' u 1:5 t 'full 5G', '' u 1:6 t 'sequential 5G'
set title 'vgg19_22k: throughput'; set xlabel 'hosts'; set ylabel 'samples/s (real-equivalent)'; set key top left
set xtics (1,2,4,8); set style data linespoints; set style histogram clustered
plot 'bench/results/scaling_v6/throughput_vgg19_22k.dat' u 1:2 w l dt 2 lc rgb 'black' t 'ideal (N x 1 host, full)', '' u 1:3 t 'full 10G', '' u 1:4 t 'sequential 10G', '' u 1:5 t 'full 5G', '' u 1:6 t 'sequential 5G'
set title 'vgg19: time split, 10G-equivalent'; set xlabel ''; set ylabel 'emulated s / iteration'; set key top left
set style data histogram; set style histogram rowstacked; set style fill solid 0.8 border -1; set boxwidth 0.7; set xtics rotate by -45 ()
plot 'bench/results/scaling_v6/split_vgg19.dat' u 2:xtic(1) t 'compute', '' u 3 t 'waiting for weights', '' u 4 t 'other'
set title 'resnet50: time split, 10G-equivalent'; set xlabel ''; set ylabel 'emulated s / iteration'; set key top left
set style data histogram; set style histogram rowstacked; set style fill solid 0.8 border -1; set boxwidth 0.7; set xtics rotate by -45 ()
plot 'bench/results/scaling_v6/split_resnet50.dat' u 2:xtic(1) t 'compute', '' u 3 t 'waiting for weights', '' u 4 t 'other'
set title 'inception_v3: time split, 10G-equivalent'; set xlabel ''; set ylabel 'emulated s / iteration'; set key top left
set style data histogram; set style histogram rowstacked; set style fill solid 0.8 border -1; set boxwidth 0.7; set xtics rotate by -45 ()
plot 'bench/results/scaling_v6/split_inception_v3.dat' u 2:xtic(1) t 'compute', '' u 3 t 'waiting for weights', '' u 4 t 'other'
set title 'vgg19_22k: time split, 10G-equivalent'; set xlabel ''; set ylabel 'emulated s / iteration'; set key top left
set style data histogram; set style histogram rowstacked; set style fill solid 0.8 border -1; set boxwidth 0.7; set xtics rotate by -45 ()
plot 'bench/results/scaling_v6/split_vgg19_22k.dat' u 2:xtic(1) t 'compute', '' u 3 t 'waiting for weights', '' u 4 t 'other'
unset multiplot
set terminal pngcairo size 1680,420 font 'sans,9'
set termoption noenhanced
set output 'bench/results/scaling_v6/predicted.png'
set multiplot layout 1,4 title 'Simulator: scaling efficiency, real speed (3 TFLOP/s per worker)'
set title 'vgg19'; set logscale x 2; set xlabel 'workers'; set ylabel 'efficiency'; set yrange [0:1.05]; set key bottom left
set style data linespoints; set xtics auto
plot 'bench/results/scaling_v6/predicted_vgg19.dat' u 1:2 t 'full 10G', '' u 1:3 t 'full 25G', '' u 1:4 t 'full 100G', '' u 1:5 t 'sequential 10G'
set title 'resnet50'; set logscale x 2; set xlabel 'workers'; set ylabel 'efficiency'; set yrange [0:1.05]; set key bottom left
set style data linespoints; set xtics auto
plot 'bench/results/scaling_v6/predicted_resnet50.dat' u 1:2 t 'full 10G', '' u 1:3 t 'full 25G', '' u 1:4 t 'full 100G', '' u 1:5 t 'sequential 10G'
set title 'inception_v3'; set logscale x 2; set xlabel 'workers'; set ylabel 'efficiency'; set yrange [0:1.05]; set key bottom left
set style data linespoints; set xtics auto
plot 'bench/results/scaling_v6/predicted_inception_v3.dat' u 1:2 t 'full 10G', '' u 1:3 t 'full 25G', '' u 1:4 t 'full 100G', '' u 1:5 t 'sequential 10G'
set title 'vgg19_22k'; set logscale x 2; set xlabel 'workers'; set ylabel 'efficiency'; set yrange [0:1.05]; set key bottom left
set style data linespoints; set xtics auto
plot 'bench/results/scaling_v6/predicted_vgg19_22k.dat' u 1:2 t 'full 10G', '' u 1:3 t 'full 25G', '' u 1:4 t 'full 100G', '' u 1:5 t 'sequential 10G'
unset multiplot
