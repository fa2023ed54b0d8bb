# a list the QP took in part (bad WR mid-list) gets no marker: its last taken WR, unsignalled, never completes and the room never drains
s/^\t\t\t\tq->marker_due = true;$/\t\t\t\tq->marker_due = false;/
