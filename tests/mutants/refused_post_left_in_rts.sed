# a refused post leaves its QP in RTS (no QP_STUCK): its receives never flush, it never quiesces and its connection is never replaced
s/^\t\t\t\tq->stuck = true;$/\t\t\t\t;/
