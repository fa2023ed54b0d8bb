# a dial refused while the previous session still rolls back is only closed (no BYE BUSY): the
# dialer counts a failed setup
/^\t\t\tpending_say_busy(d, pc);$/ d
