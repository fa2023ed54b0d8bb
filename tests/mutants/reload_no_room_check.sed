# members.c: a reload adds peers whatever room the completion queues have (their QPs could
# overrun the CQ)
s/	if (nadd > room) {/	if (0) {/
