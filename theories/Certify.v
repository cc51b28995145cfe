(** * Certify: firing certificates, checked by the proved matcher

    [Rewrite.validate] checks that the graph after a driver's pass is the
    graph before it with the firings applied, but takes the firings on
    trust: it never sees the rules. Here each firing comes with a
    certificate, and [validate_firings] accepts a pass only if, besides
    [validate]:

    - the term graph [before] (the validator's labels, [Rewrite.tgraph])
      agrees with the matcher's graph [G] ([Syntax.graph]) on the nodes the
      map [gm] gives an image: [agrees]. [gm] sends a before node to a
      node of [G], one to one; [sym] sends a label of the term graph to the
      operator of [G] it stands for (several labels may share an operator:
      the driver folds non-node arguments into its labels); a node with an
      image has its label's operator and, as arguments, nodes whose images
      are the children of its image, in order. So the term graph below a
      node with an image is, node for node, the graph the matcher sees
      below its image;
    - for a rule's firing [(r, p)], certificate [CRule k sb t]: the proved
      matcher ([Entry.set_match], i.e. [Entry.match_root]) matches root
      [k] of the loaded pattern set at the image of [r], and its bindings
      are the images of the substitution [sb] (pattern variable -> before
      node); the replacement [p] is the template [t] instantiated with
      [sb]: a template node is an after node with the template's label
      whose arguments instantiate the template's arguments, a variable [x]
      an after node standing for the before node [sb(x)] ([Rewrite.corr]:
      its image under the map, or its replacement if it was fired). A
      template that is a single variable must be the image of that node
      (not a replacement: a cycle of such firings would prove nothing);
    - for a merge of equal nodes (hash-consing, FX common subexpressions),
      certificate [CMerge]: the replacement has the root's label and its
      arguments stand for the root's.

    [validate_firings_sound] says what acceptance means; [rewrite_preserves]
    that, given each fired rule's equation ([rule_eq]: wherever its
    pattern matches, the root denotes what its template does under the
    substitution), every output of [after] denotes what the same output of
    [before] did. The rule equation is the one hypothesis per rule; it is
    what [check-rules] proves (over the reals) or tests. *)

From Coq Require Import List Bool Arith Lia Sorted.
From PyPM Require Import Syntax Subst Declarative Entry Rewrite.
Import ListNotations.

(** ** Templates and certificates *)

(** A rule's replacement: a term over the pattern's variables whose
    operators are labels of the term graph (with the constants the rule
    body computed folded in, as the driver folds them). *)
Inductive tmpl :=
| TVar (x : var)
| TApp (l : nat) (ts : list tmpl).

Section TmplInd.
  Variable P : tmpl -> Prop.
  Variable HVar : forall x, P (TVar x).
  Variable HApp : forall l ts, Forall P ts -> P (TApp l ts).

  Fixpoint tmpl_ind' (t : tmpl) : P t :=
    let fix go (l : list tmpl) : Forall P l :=
        match l with
        | [] => Forall_nil P
        | u :: l' => Forall_cons u (tmpl_ind' u) (go l')
        end in
    match t with
    | TVar x => HVar x
    | TApp l ts => HApp l ts (go ts)
    end.
End TmplInd.

(** The certificate of one firing. [CRule k sb t]: root [k] of the loaded
    pattern set, the substitution [sb] (pattern variable -> before node),
    the template [t]. [CMerge]: the merge of a node into an equal one. *)
Inductive cert :=
| CRule (k : nat) (sb : list (var * nat)) (t : tmpl)
| CMerge.

(** The denotation of a template, [env] giving the variables' values. *)
Section TDen.
  Variable V : Type.
  Variable interp : nat -> list V -> V.

  Fixpoint tden (env : var -> V) (t : tmpl) : V :=
    match t with
    | TVar x => env x
    | TApp l ts => interp l (map (tden env) ts)
    end.
End TDen.

(** ** What the checker checks, as relations *)

(** A partial map given as a list ([None] beyond its end). *)
Definition opt_at (l : list (option nat)) (i : nat) : option nat :=
  match nth_error l i with Some o => o | None => None end.

(** The term graph [g] agrees with the matcher's graph [G] through [gm]
    (node -> node of [G], one to one) and [sym] (label -> operator). *)
Definition agrees (G : graph) (sym : nat -> option symbol) (g : tgraph)
    (gm : nat -> option node) : Prop :=
  (forall i t, gm i = Some t ->
     i < length (tnodes g) /\ sym (tlabel (tnode_at g i)) = Some (label G t) /\
     Forall2 (fun a c => gm a = Some c) (targs (tnode_at g i)) (children G t)) /\
  (forall i j t, gm i = Some t -> gm j = Some t -> i = j).

(** The matcher's substitution read through [gm]. *)
Definition through (gm : nat -> option node) (s : var -> option nat) (x : var) : option node :=
  match s x with Some v => gm v | None => None end.

Section Inst.
  Variable A : tgraph.
  Variable fs : list (nat * nat).
  Variable mp : list (option nat).
  Variable s : var -> option nat.

  (** After node [h] is template [t] instantiated with [s]. *)
  Fixpoint inst (t : tmpl) (h : nat) {struct t} : Prop :=
    match t with
    | TVar x => exists v, s x = Some v /\ corr fs mp h v
    | TApp l ts =>
        h < length (tnodes A) /\ tlabel (tnode_at A h) = l /\
        (fix go (ts : list tmpl) (hs : list nat) : Prop :=
           match ts, hs with
           | [], [] => True
           | u :: ts', a :: hs' => inst u a /\ go ts' hs'
           | _, _ => False
           end) ts (targs (tnode_at A h))
    end.

  (** The replacement itself: a single variable must be the image of its
      node under the map. *)
  Definition inst_root (t : tmpl) (h : nat) : Prop :=
    match t with
    | TVar x => exists v, s x = Some v /\ ~ In v (map fst fs) /\ nth_error mp h = Some (Some v)
    | TApp _ _ => inst t h
    end.
End Inst.

(** A rule's equation, for an interpretation [interp] of the labels and the
    labelling [sym]: in any term graph agreeing with a matcher's graph, at
    any node whose image the rule's pattern [d] matches under (the images
    of) a substitution [s], the node denotes what the template [t] does
    with each variable [x] read as the node [s x]. *)
Definition rule_eq (V : Type) (interp : nat -> list V -> V) (dflt : V) (D : list pdef)
    (sym : nat -> option symbol) (d : pdef) (t : tmpl) : Prop :=
  forall G g gm r tr s σ ψ,
    wf_tgraph g -> agrees G sym g gm -> gm r = Some tr ->
    (forall x, σ x = through gm s x) ->
    matches G D σ ψ (body d) tr ->
    dnode V interp dflt g r =
      tden V interp (fun x => match s x with Some v => dnode V interp dflt g v | None => dflt end) t.

(** ** The checker *)

(** Reason codes, after [Rewrite]'s 1-8. *)
Definition R_AGREE := 9.
Definition R_CERTS := 10.
Definition R_MATCH := 11.
Definition R_SUBST := 12.
Definition R_TEMPLATE := 13.

Definition opt_find (T : rtab (option nat)) (i : nat) : option nat :=
  match rfind T i with Some o => o | None => None end.

Fixpoint args_agree (GT : rtab (option nat)) (ahs : list nat) (cs : list node) : bool :=
  match ahs, cs with
  | [], [] => true
  | a :: ahs', c :: cs' =>
      match opt_find GT a with
      | Some c' => Nat.eqb c' c && args_agree GT ahs' cs'
      | None => false
      end
  | _, _ => false
  end.

(** The first before node with an image that disagrees (or shares its
    image with another, or has one outside the graph's [nG] nodes).
    Distinct images by a hint: [GI] names, for each node of [G], the
    before node [i] whose image it is as [i + 1] ([0]: none); a wrong hint
    rejects. *)
Fixpoint bad_agree (G : graph) (nG : nat) (ST GT : rtab (option nat)) (GI : rtab nat) (i : nat)
    (ns : list tnode) (gm : list (option nat)) : option nat :=
  match ns, gm with
  | n :: ns', Some t :: gm' =>
      if Nat.ltb t nG && hint_ok GI t i &&
         match opt_find ST (tlabel n) with Some f => Nat.eqb f (label G t) | None => false end &&
         args_agree GT (targs n) (children G t)
      then bad_agree G nG ST GT GI (S i) ns' gm' else Some i
  | _ :: ns', None :: gm' => bad_agree G nG ST GT GI (S i) ns' gm'
  | _, _ => None
  end.

(** The certificate's substitution, read through the map, is the
    matcher's bindings. *)
Fixpoint subst_agree (GT : rtab (option nat)) (sb : list (var * nat))
    (bs : list (var * node)) : bool :=
  match sb, bs with
  | [], [] => true
  | (x, v) :: sb', (y, c) :: bs' =>
      Nat.eqb x y &&
      match opt_find GT v with Some c' => Nat.eqb c' c | None => false end &&
      subst_agree GT sb' bs'
  | _, _ => false
  end.

Section Check.
  Variable AT : rtab tnode.
  Variable F : VarMap.t nat.
  Variable MT : rtab (option nat).
  Variable sb : list (var * nat).

  Fixpoint inst_b (t : tmpl) (h : nat) {struct t} : bool :=
    match t with
    | TVar x => match assoc sb x with Some v => arg_ok F MT h v | None => false end
    | TApp l ts =>
        match rfind AT h with
        | Some n =>
            Nat.eqb (tlabel n) l &&
            (fix go (ts : list tmpl) (hs : list nat) : bool :=
               match ts, hs with
               | [], [] => true
               | u :: ts', a :: hs' => inst_b u a && go ts' hs'
               | _, _ => false
               end) ts (targs n)
        | None => false
        end
    end.

  Definition inst_root_b (t : tmpl) (h : nat) : bool :=
    match t with
    | TVar x =>
        match assoc sb x with
        | Some v =>
            match VarMap.find v F with
            | Some _ => false
            | None => match rfind MT h with Some (Some g) => Nat.eqb g v | _ => false end
            end
        | None => false
        end
    | TApp _ _ => inst_b t h
    end.
End Check.

Section Certs.
  Variable G : graph.
  Variable ps : pset.
  Variable fuel : nat.
  Variable GT : rtab (option nat).
  Variable F : VarMap.t nat.
  Variable MT : rtab (option nat).
  Variable AT BT : rtab tnode.

  (** One firing: [None] accepts, [Some code] rejects. *)
  Definition check_cert (r p : nat) (c : cert) : option nat :=
    match c with
    | CMerge =>
        match rfind AT p, rfind BT r with
        | Some n, Some m =>
            if Nat.eqb (tlabel n) (tlabel m) then
              match bad_pair F MT 0 (targs n) (targs m) with
              | None => None
              | Some _ => Some R_TEMPLATE
              end
            else Some R_TEMPLATE
        | _, _ => Some R_TEMPLATE
        end
    | CRule k sb t =>
        match opt_find GT r with
        | None => Some R_MATCH
        | Some tr =>
            match set_match G ps fuel k tr with
            | RMatch bs _ =>
                if subst_agree GT sb bs then
                  if inst_root_b AT F MT sb t p then None else Some R_TEMPLATE
                else Some R_SUBST
            | _ => Some R_MATCH
            end
        end
    end.

  (** The first firing [i + j] whose certificate fails, with the code. *)
  Fixpoint bad_certs (i : nat) (fs : list (nat * nat)) (cs : list cert) : option reject :=
    match fs, cs with
    | [], [] => None
    | (r, p) :: fs', c :: cs' =>
        match check_cert r p c with
        | Some code => Some (code, Some i)
        | None => bad_certs (S i) fs' cs'
        end
    | _, _ => Some (R_CERTS, None)
    end.
End Certs.

(** The checker the library runs ([pypm_validate_firings]): [validate],
    then the agreement of the graphs, then each firing's certificate.
    [nG] is the number of nodes of [G], [sym] the operator of each label
    ([None]: a label no node with an image has), [gm] the image of each
    before node ([None]: none), [cs] a certificate per firing; [FI], [MI],
    [US] ([validate]'s) and [GI] ([bad_agree]'s) are hints, trusted for
    nothing. *)
Definition validate_firings (G : graph) (nG : nat) (ps : pset) (fuel : nat)
    (sym gm : list (option nat)) (before after : tgraph) (fs : list (nat * nat))
    (mp : list (option nat)) (cs : list cert) (FI MI US GI : rtab nat) : option reject :=
  (* the tables [validate] reads, built once for it and the certificates *)
  let F := fire_table fs in
  let MT := table mp in
  let BT := table (tnodes before) in
  let AT := table (tnodes after) in
  match validate_with F MT BT AT FI MI US before after fs mp with
  | Some e => Some e | None =>
  if negb (Nat.eqb (length gm) (length (tnodes before))) then Some (R_AGREE, None) else
  let ST := table sym in
  let GT := table gm in
  match bad_agree G nG ST GT GI 0 (tnodes before) gm with
  | Some i => Some (R_AGREE, Some i)
  | None =>
      bad_certs G ps fuel GT F MT AT BT 0 fs cs
  end end.

(** ** Proofs *)

Lemma opt_find_table : forall l i,
  opt_find (table l) i = opt_at l i.
Proof. intros l i. unfold opt_find, opt_at. rewrite table_find. reflexivity. Qed.

Lemma args_agree_spec : forall GT ahs cs, args_agree GT ahs cs = true ->
  Forall2 (fun a c => opt_find GT a = Some c) ahs cs.
Proof.
  intros GT. induction ahs as [|a ahs IH]; intros [|c cs] H; simpl in H; try discriminate;
    constructor.
  - destruct (opt_find GT a) as [c'|]; [|discriminate].
    apply andb_true_iff in H as [H _]. apply Nat.eqb_eq in H. congruence.
  - destruct (opt_find GT a) as [c'|]; [|discriminate].
    apply andb_true_iff in H as [_ H]. auto.
Qed.

Lemma bad_agree_spec : forall G nG ST GT GI ns gm i,
  bad_agree G nG ST GT GI i ns gm = None ->
  forall j t, j < length ns -> nth_error gm j = Some (Some t) ->
    opt_find ST (tlabel (nth j ns tnode0)) = Some (label G t) /\
    Forall2 (fun a c => opt_find GT a = Some c) (targs (nth j ns tnode0)) (children G t) /\
    rfind GI t = Some (S (i + j)).
Proof.
  intros G nG ST GT GI. induction ns as [|n ns IH]; intros gm i H j t Hj Hg;
    [simpl in Hj; lia|].
  destruct gm as [|[t0|] gm]; [destruct j; discriminate|..]; simpl in H.
  - destruct (Nat.ltb t0 nG && hint_ok GI t0 i &&
              match opt_find ST (tlabel n) with Some f => Nat.eqb f (label G t0) | None => false end &&
              args_agree GT (targs n) (children G t0)) eqn:E; [|discriminate].
    apply andb_true_iff in E as [E E4]. apply andb_true_iff in E as [E E3].
    apply andb_true_iff in E as [_ E2].
    destruct j as [|j]; simpl in Hg.
    + inversion Hg; subst t0. simpl. split; [|split].
      * revert E3. destruct (opt_find ST (tlabel n)) as [f|]; intros E3; [|discriminate].
        apply Nat.eqb_eq in E3. subst f. reflexivity.
      * apply args_agree_spec. exact E4.
      * unfold hint_ok in E2. destruct (rfind GI t) as [i'|]; try discriminate.
        apply Nat.eqb_eq in E2. subst i'. rewrite Nat.add_0_r. reflexivity.
    + simpl in Hj. destruct (IH _ _ H j t ltac:(lia) Hg) as (H1 & H2 & H3).
      simpl. split; [exact H1|]. split; [exact H2|]. rewrite Nat.add_succ_r. exact H3.
  - destruct j as [|j]; simpl in Hg; [discriminate|]. simpl in Hj.
    destruct (IH _ _ H j t ltac:(lia) Hg) as (H1 & H2 & H3).
    simpl. split; [exact H1|]. split; [exact H2|]. rewrite Nat.add_succ_r. exact H3.
Qed.

Lemma agrees_check : forall G nG sym gm gi g,
  length gm = length (tnodes g) ->
  bad_agree G nG (table sym) (table gm) gi 0 (tnodes g) gm = None ->
  agrees G (opt_at sym) g (opt_at gm).
Proof.
  intros G nG sym gm gi g Hl H.
  assert (Hi : forall i t, opt_at gm i = Some t -> i < length (tnodes g) /\ nth_error gm i = Some (Some t)).
  { intros i t Ht. unfold opt_at in Ht. destruct (nth_error gm i) as [o|] eqn:E; [|discriminate].
    subst o. split; [|reflexivity]. rewrite <- Hl. apply nth_error_Some. congruence. }
  split.
  - intros i t Ht. destruct (Hi i t Ht) as [Hlt Hn].
    destruct (bad_agree_spec _ _ _ _ _ _ _ _ H i t Hlt Hn) as (H1 & H2 & _).
    rewrite opt_find_table in H1. split; [exact Hlt|]. split; [exact H1|].
    unfold tnode_at. clear -H2. induction H2 as [|a c l1 l2 Hac _ IH]; constructor; [|exact IH].
    rewrite opt_find_table in Hac. exact Hac.
  - intros i j t Ht1 Ht2. destruct (Hi i t Ht1) as [Hlt1 Hn1]. destruct (Hi j t Ht2) as [Hlt2 Hn2].
    destruct (bad_agree_spec _ _ _ _ _ _ _ _ H i t Hlt1 Hn1) as (_ & _ & E1).
    destruct (bad_agree_spec _ _ _ _ _ _ _ _ H j t Hlt2 Hn2) as (_ & _ & E2).
    simpl in E1, E2. congruence.
Qed.

Lemma subst_agree_spec : forall GT sb bs, subst_agree GT sb bs = true ->
  forall x, assoc bs x = match assoc sb x with Some v => opt_find GT v | None => None end.
Proof.
  intros GT. induction sb as [|[x v] sb IH]; intros [|[y c] bs] H z; simpl in H; try discriminate;
    simpl; auto.
  apply andb_true_iff in H as [H H3]. apply andb_true_iff in H as [H1 H2].
  apply Nat.eqb_eq in H1. subst y. rewrite (IH _ H3 z).
  destruct (Nat.eqb z x); auto.
  destruct (opt_find GT v) as [c'|]; [|discriminate]. apply Nat.eqb_eq in H2. congruence.
Qed.

Lemma after_table : forall A h n,
  rfind (table (tnodes A)) h = Some n ->
  h < length (tnodes A) /\ n = tnode_at A h.
Proof.
  intros A h n H. rewrite table_find in H. split.
  - apply nth_error_Some. congruence.
  - unfold tnode_at. symmetry. apply nth_error_nth. exact H.
Qed.

Lemma inst_b_inst : forall A fs mp sb t h,
  inst_b (table (tnodes A)) (fire_table fs)
    (table mp) sb t h = true ->
  inst A fs mp (assoc sb) t h.
Proof.
  intros A fs mp sb t. induction t as [x|l ts IH] using tmpl_ind'; intros h H; simpl in *.
  - destruct (assoc sb x) as [v|]; [|discriminate]. exists v. split; [reflexivity|].
    apply arg_ok_corr. exact H.
  - destruct (rfind _ h) as [n|] eqn:E; [|discriminate].
    apply after_table in E as [Hh ->]. apply andb_true_iff in H as [H1 H2].
    apply Nat.eqb_eq in H1. split; [exact Hh|]. split; [exact H1|].
    revert H2. generalize (targs (tnode_at A h)). clear H1.
    induction IH as [|u ts Hu Hts IHl]; intros [|a hs] H2; simpl in *; auto; try discriminate.
    apply andb_true_iff in H2 as [H2 H3]. split; [apply Hu; exact H2 | apply IHl; exact H3].
Qed.

Lemma inst_root_b_inst : forall A fs mp sb t h,
  inst_root_b (table (tnodes A)) (fire_table fs)
    (table mp) sb t h = true ->
  inst_root A fs mp (assoc sb) t h.
Proof.
  intros A fs mp sb [x|l ts] h H; simpl in *.
  - destruct (assoc sb x) as [v|]; [|discriminate].
    destruct (VarMap.find v (fire_table fs)) eqn:Ef; [discriminate|].
    rewrite table_find in H. destruct (nth_error mp h) as [[g|]|] eqn:Em; try discriminate.
    apply Nat.eqb_eq in H. subst g. exists v. split; [reflexivity|]. split; [|first [exact Em | reflexivity]].
    exact (fire_table_none _ _ Ef).
  - exact (inst_b_inst A fs mp sb (TApp l ts) h H).
Qed.

Lemma bad_certs_spec : forall G ps fuel GT F MT AT BT fs cs i,
  bad_certs G ps fuel GT F MT AT BT i fs cs = None ->
  length cs = length fs /\
  forall j r p c, nth_error fs j = Some (r, p) -> nth_error cs j = Some c ->
    check_cert G ps fuel GT F MT AT BT r p c = None.
Proof.
  intros G ps fuel GT F MT AT BT. induction fs as [|[r p] fs IH]; intros [|c cs] i H;
    simpl in H; try discriminate.
  - split; [reflexivity|]. intros [|j]; discriminate.
  - destruct (check_cert G ps fuel GT F MT AT BT r p c) eqn:E; [discriminate|].
    destruct (IH _ _ H) as [Hl Hc]. split; [simpl; auto|].
    intros [|j] r' p' c' Hf Hcs; simpl in Hf, Hcs.
    + inversion Hf; inversion Hcs; subst. exact E.
    + exact (Hc j r' p' c' Hf Hcs).
Qed.

Lemma Forall2_len : forall {X Y} (R : X -> Y -> Prop) l1 l2, Forall2 R l1 l2 -> length l1 = length l2.
Proof. intros X Y R l1 l2 H. induction H; simpl; auto. Qed.

Lemma set_match_some : forall G D roots ps fuel k t bs fbs,
  load_set D roots = Some ps -> set_match G ps fuel k t = RMatch bs fbs ->
  exists ri, nth_error roots k = Some ri /\ match_root G D fuel ri t = RMatch bs fbs.
Proof.
  intros G D roots ps fuel k t bs fbs Hl H.
  destruct (load_set_roots D roots ps Hl) as [_ Hf].
  destruct (nth_error roots k) as [ri|] eqn:E.
  - exists ri. split; [reflexivity|]. rewrite <- (set_match_correct G D roots ps fuel k ri t Hl E).
    exact H.
  - exfalso. unfold set_match in H. apply nth_error_None in E.
    rewrite (Forall2_len _ _ _ Hf) in E. apply nth_error_None in E. rewrite E in H. discriminate.
Qed.

(** What the certificate of firing [(r, p)] says when accepted. *)
Definition certified (G : graph) (D : list pdef) (roots : list nat) (sym gm : list (option nat))
    (before after : tgraph) (fs : list (nat * nat)) (mp : list (option nat))
    (r p : nat) (c : cert) : Prop :=
  match c with
  | CMerge =>
      tlabel (tnode_at after p) = tlabel (tnode_at before r) /\
      Forall2 (corr fs mp) (targs (tnode_at after p)) (targs (tnode_at before r))
  | CRule k sb t =>
      exists ri d tr σ ψ,
        nth_error roots k = Some ri /\ nth_error D ri = Some d /\
        opt_at gm r = Some tr /\
        (forall x, σ x = through (opt_at gm) (assoc sb) x) /\
        matches G D σ ψ (body d) tr /\
        inst_root after fs mp (assoc sb) t p
  end.

Theorem validate_firings_sound : forall G nG D roots ps fuel sym gm before after fs mp cs fi mi us gi,
  load_set D roots = Some ps ->
  validate_firings G nG ps fuel sym gm before after fs mp cs fi mi us gi = None ->
  validate before after fs mp fi mi us = None /\
  agrees G (opt_at sym) before (opt_at gm) /\
  length cs = length fs /\
  forall i r p c, nth_error fs i = Some (r, p) -> nth_error cs i = Some c ->
    certified G D roots sym gm before after fs mp r p c.
Proof.
  intros G nG D roots ps fuel sym gm B A fs mp cs fi mi us gi Hl H. unfold validate_firings in H.
  cbv zeta in H. fold (validate B A fs mp fi mi us) in H.
  destruct (validate B A fs mp fi mi us) eqn:Ev; [discriminate|].
  destruct (negb (Nat.eqb (length gm) (length (tnodes B)))) eqn:El; [discriminate|].
  apply negb_false_iff, Nat.eqb_eq in El.
  destruct (bad_agree _ _ _ _ _ 0 _ _) eqn:Ea; [discriminate|].
  pose proof (agrees_check G nG sym gm gi B El Ea) as Hag.
  destruct (bad_certs_spec _ _ _ _ _ _ _ _ _ _ _ H) as [Hlen Hc].
  split; [reflexivity|]. split; [exact Hag|]. split; [exact Hlen|].
  intros i r p c Hf Hcs. specialize (Hc i r p c Hf Hcs).
  destruct c as [k sb t|]; simpl in Hc |- *.
  - rewrite opt_find_table in Hc. destruct (opt_at gm r) as [tr|] eqn:Eg; [|discriminate].
    destruct (set_match G ps fuel k tr) as [bs fbs| |] eqn:Em; try discriminate.
    destruct (subst_agree _ sb bs) eqn:Es; [|discriminate].
    destruct (inst_root_b _ _ _ sb t p) eqn:Ei; [|discriminate].
    destruct (set_match_some G D roots ps fuel k tr bs fbs Hl Em) as (ri & Hri & Hm).
    destruct (match_root_sound G D fuel ri tr bs fbs Hm) as (d & Hd & Hmat & _).
    exists ri, d, tr, (assoc bs), (assoc fbs). split; [exact Hri|]. split; [exact Hd|].
    split; [reflexivity|]. split.
    + intros x. unfold through. rewrite (subst_agree_spec _ _ _ Es x).
      destruct (assoc sb x); [apply opt_find_table | reflexivity].
    + split; [exact Hmat|]. apply inst_root_b_inst. exact Ei.
  - destruct (rfind _ p) as [n|] eqn:Ea'; [|discriminate].
    destruct (rfind _ r) as [m|] eqn:Eb; [|discriminate].
    apply after_table in Ea' as [_ ->]. apply after_table in Eb as [_ ->].
    destruct (Nat.eqb _ _) eqn:E1; [|discriminate].
    destruct (bad_pair _ _ 0 _ _) eqn:E2; [discriminate|].
    apply Nat.eqb_eq in E1. split; [exact E1|].
    apply (Forall2_weaken (fun ah ag => arg_ok (fire_table fs)
                             (table mp) ah ag = true)).
    + intros ah ag. apply arg_ok_corr.
    + exact (bad_pair_forall2 _ _ _ _ _ E2).
Qed.

Section Preserves.
  Variable V : Type.
  Variable interp : nat -> list V -> V.
  Variable dflt : V.
  Notation dn := (dnode V interp dflt).

  Lemma Forall2_map_eq : forall (R : nat -> nat -> Prop) (f g : nat -> V) l1 l2,
    Forall2 R l1 l2 -> (forall a b, In a l1 -> R a b -> f a = g b) -> map f l1 = map g l2.
  Proof.
    intros R f g l1 l2 H. induction H as [|a b l1 l2 Hab H IH]; intros Hf; simpl; auto.
    rewrite (Hf a b (or_introl eq_refl) Hab). f_equal. apply IH. intros; apply Hf; simpl; auto.
  Qed.

  (** Firing soundness, given each fired rule's equation: every output of
      [after] denotes what the same output of [before] did. *)
  Theorem rewrite_preserves : forall G nG D roots ps fuel sym gm before after fs mp cs fi mi us gi,
    load_set D roots = Some ps ->
    validate_firings G nG ps fuel sym gm before after fs mp cs fi mi us gi = None ->
    (forall k sb t ri d, In (CRule k sb t) cs -> nth_error roots k = Some ri ->
       nth_error D ri = Some d -> rule_eq V interp dflt D (opt_at sym) d t) ->
    denote V interp dflt after = denote V interp dflt before.
  Proof.
    intros G nG D roots ps fuel sym gm B A fs mp cs fi mi us gi Hl Hv Heq.
    destruct (validate_firings_sound G nG D roots ps fuel sym gm B A fs mp cs fi mi us gi Hl Hv)
      as (Hval & Hag & Hlen & Hcert).
    destruct (validate_renaming B A fs mp fi mi us Hval)
      as (HwB & HwA & Hfr & _ & _ & Hmap & _ & _).
    pose proof HwA as [HnA _]. pose proof HwB as [HnB _].
    (* the claim at each after node: a mapped node denotes its before node,
       a replacement its root *)
    set (P := fun h => (forall g, nth_error mp h = Some (Some g) -> dn A h = dn B g) /\
                       (forall r, In (r, h) fs -> dn A h = dn B r)).
    assert (Hcorr : forall h a b, (forall a', a' < h -> P a') -> a < h -> corr fs mp a b ->
                    dn A a = dn B b).
    { intros h a b IH Ha [Hin|[_ Hm]]; [exact (proj2 (IH a Ha) b Hin) | exact (proj1 (IH a Ha) b Hm)]. }
    assert (Hall : forall h, h < length (tnodes A) -> P h).
    { intro h. induction h as [h IH] using lt_wf_ind. intro Hh.
      assert (IH' : forall a, a < h -> P a).
      { intros a Ha. apply IH; [exact Ha | lia]. }
      assert (Hm : forall g, nth_error mp h = Some (Some g) -> dn A h = dn B g).
      { intros g Hg. destruct (Hmap h g Hg) as (Hgb & _ & _ & Hlab & Hargs).
        rewrite (dnode_eq V interp dflt A h (fun a => HnA h a Hh) Hh).
        rewrite (dnode_eq V interp dflt B g (fun a => HnB g a Hgb) Hgb).
        rewrite Hlab. f_equal. apply (Forall2_map_eq _ _ _ _ _ Hargs).
        intros a b Ha Hab. exact (Hcorr h a b IH' (HnA h a Hh Ha) Hab). }
      split; [exact Hm|]. intros r Hin.
      destruct (In_nth_error _ _ Hin) as [i Hi].
      assert (Hci : exists c, nth_error cs i = Some c).
      { destruct (nth_error cs i) as [c|] eqn:E; [eauto|].
        apply nth_error_None in E. rewrite Hlen in E. apply nth_error_None in E. congruence. }
      destruct Hci as [c Hc]. pose proof (Hcert i r h c Hi Hc) as Hct.
      pose proof (proj1 (Hfr r h Hin)) as Hr.
      destruct c as [k sb t|]; simpl in Hct.
      - destruct Hct as (ri & d & tr & σ & ψ & Hri & Hd & Hg & Hσ & Hmat & Hinst).
        assert (Hc' : In (CRule k sb t) cs) by (eapply nth_error_In; exact Hc).
        rewrite (Heq k sb t ri d Hc' Hri Hd G B (opt_at gm) r tr (assoc sb) σ ψ HwB Hag Hg Hσ Hmat).
        set (env := fun x => match assoc sb x with Some v => dn B v | None => dflt end).
        (* a template node below [h] denotes the template *)
        assert (Hden : forall u a, a < h -> inst A fs mp (assoc sb) u a -> dn A a = tden V interp env u).
        { intros u. induction u as [x|l ts IHu] using tmpl_ind'; intros a Ha Hi'; simpl in Hi' |- *.
          - destruct Hi' as (v & Hv' & Hc2). unfold env. rewrite Hv'.
            exact (Hcorr h a v IH' Ha Hc2).
          - destruct Hi' as (Hal & Hlab & Hgo).
            rewrite (dnode_eq V interp dflt A a (fun b => HnA a b Hal) Hal). rewrite Hlab. f_equal.
            assert (Hlt : forall b, In b (targs (tnode_at A a)) -> b < h).
            { intros b Hb. pose proof (HnA a b Hal Hb). lia. }
            revert Hgo Hlt. generalize (targs (tnode_at A a)).
            induction IHu as [|u ts Hu Hts IHl]; intros [|b hs] Hgo Hlt; simpl in *; auto;
              try contradiction.
            destruct Hgo as [H1 H2]. f_equal.
            + apply Hu; [apply Hlt; left; reflexivity | exact H1].
            + apply IHl; auto. }
        destruct t as [x|l ts]; simpl in Hinst |- *.
        + destruct Hinst as (v & Hv' & _ & Hmv). unfold env. rewrite Hv'. exact (Hm v Hmv).
        + destruct Hinst as (_ & Hlab & Hgo).
          rewrite (dnode_eq V interp dflt A h (fun a => HnA h a Hh) Hh). rewrite Hlab. f_equal.
          assert (Hlt : forall b, In b (targs (tnode_at A h)) -> b < h) by (intros b Hb; exact (HnA h b Hh Hb)).
          clear Hc Hc'. revert Hgo Hlt. generalize (targs (tnode_at A h)). induction ts as [|u ts IHl];
            intros [|b hs] Hgo Hlt; simpl in *; auto; try contradiction.
          destruct Hgo as [H1 H2]. f_equal.
          * apply Hden; [apply Hlt; left; reflexivity | exact H1].
          * apply IHl; auto.
      - destruct Hct as [Hlab Hargs].
        rewrite (dnode_eq V interp dflt A h (fun a => HnA h a Hh) Hh).
        rewrite (dnode_eq V interp dflt B r (fun a => HnB r a Hr) Hr).
        rewrite Hlab. f_equal. apply (Forall2_map_eq _ _ _ _ _ Hargs).
        intros a b Ha Hab. exact (Hcorr h a b IH' (HnA h a Hh Ha) Hab). }
    apply (validate_sound V interp dflt B A fs mp fi mi us Hval).
    intros r p Hin. exact (proj2 (Hall p (proj2 (Hfr r p Hin))) r Hin).
  Qed.
End Preserves.
