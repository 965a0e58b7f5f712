#!/bin/bash
# timeout: 180
# kill -9 of the daemon under load: queued and in-flight I/O fails with EIO
# within seconds, nothing hangs, the disk disappears, bius.ko unloads.
source /bius/lib.sh
require_bius

FIO_END_LIMIT=15	# seconds from the kill to fio's exit
GONE_LIMIT=10		# seconds from fio's exit to the disk's removal

step "create a 64 MiB ramdisk with 2 queues"
bius_start --size 64M --queues 2 --name killme ramdisk
dev=$BIUS_DEV

step "start fio: direct randrw, 4 jobs x QD 4, 120 s"
fio --name=load --filename="$dev" --direct=1 --ioengine=libaio --iodepth=4 \
	--rw=randrw --bs=4k --numjobs=4 --time_based --runtime=120 \
	--group_reporting --output=fio.txt &
fio_pid=$!
# (kill_daemon_under_fio waits until the I/O flows: no fixed sleep)
kill_daemon_under_fio "$fio_pid" '$1 + $5' I/Os 'err= *5|Input/output error'

rmmod_bius
echo "daemon-kill: OK"
