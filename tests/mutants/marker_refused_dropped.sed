# a refused marker is not tried again (nor the QP moved to ERR): the WRs before it stay uncompleted
s/^\t\tq->stuck = true;$/\t\tq->marker_due = false;/
