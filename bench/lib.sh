# bench/lib.sh: shell helpers the bench scripts source.

# median: the median of the numbers on standard input, one per line.
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
